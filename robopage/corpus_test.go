package robopage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const corpus = "../../shared/corpus/robopages"

type wantProblem struct {
	File     string
	Line     int
	Function string
	Severity Severity
	Message  string
}

// Every page of the corpus loads; validation without the host checks
// finds one broken page (eyewitness) and the warnings of the reference's
// notes on the corpus.
func TestCorpus(t *testing.T) {
	if _, err := os.Stat(corpus); err != nil {
		t.Skip("corpus not found:", err)
	}
	lib, err := Load(corpus, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(lib.Problems) != 0 {
		t.Errorf("load problems: %v", lib.Problems)
	}
	params := 0
	for _, f := range lib.Functions() {
		params += len(f.Parameters)
	}
	if len(lib.Pages) != 28 || len(lib.Functions()) != 55 || params != 81 {
		t.Errorf("loaded %d pages, %d functions, %d parameters; want 28, 55, 81", len(lib.Pages), len(lib.Functions()), params)
	}
	var got []wantProblem
	broken := map[string]bool{}
	for _, p := range lib.Validate(context.Background(), ValidateOptions{}) {
		file := strings.TrimPrefix(p.File, corpus+"/")
		got = append(got, wantProblem{file, p.Line, p.Function, p.Severity, strings.ReplaceAll(p.Message, lib.Root+"/", "<root>/")})
		if p.Severity == Error {
			broken[file] = true
		}
	}
	want := []wantProblem{
		{"cybersecurity/cicd/squealer.yml", 20, "squealer_scan_git_repo", Warning, "the first cmdline item ${repository} is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app"},
		{"cybersecurity/cicd/squealer.yml", 35, "squealer_scan_everything_git_repo", Warning, "the first cmdline item ${repository} is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 22, "eyewitness_single", Warning, "the first cmdline item --headless is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 47, "eyewitness_file", Warning, "volume <root>/cybersecurity/offensive/information-gathering/${target_file}:/eyewitness/targets.txt: volumes are not interpolated, docker receives the text as is; only ${cwd} is replaced"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 49, "eyewitness_file", Warning, "the first cmdline item --headless is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 61, "eyewitness_nmap_xml", Warning, "parameter xml_file is not used by the command line: its value is ignored"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 74, "eyewitness_nmap_xml", Warning, "volume <root>/cybersecurity/offensive/information-gathering/${nmap_xml_file}:/eyewitness/scan.xml: volumes are not interpolated, docker receives the text as is; only ${cwd} is replaced"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 76, "eyewitness_nmap_xml", Warning, "the first cmdline item --headless is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 80, "eyewitness_nmap_xml", Error, "${nmap_xml_file} names no parameter, so every call fails with \"argument nmap_xml_file not provided\": declare nmap_xml_file under `parameters` or fix the placeholder"},
		{"cybersecurity/offensive/information-gathering/eyewitness.yml", 114, "eyewitness_custom_ports", Warning, "the first cmdline item --headless is dropped when the function runs in its container (the program is replaced by the image's entrypoint): put the program first, or set preserve_app"},
		{"cybersecurity/offensive/information-gathering/ffufai.yml", 44, "ffufai_full_scan", Warning, "parameter threads is not used by the command line: its value is ignored"},
		{"cybersecurity/offensive/web-exploitation/sqlmap.yml", 19, "sqlmap_scan", Warning, "volume $HOME:/var/sqlmap: volumes are not interpolated, docker receives the text as is; only ${cwd} is replaced"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 33, "zap_baseline_scan", Warning, "volume ./:/zap/wrk: docker rejects a relative host path; start it with ${cwd}/ for the page's folder"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 71, "zap_full_scan", Warning, "volume ./:/zap/wrk: docker rejects a relative host path; start it with ${cwd}/ for the page's folder"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 109, "zap_api_scan", Warning, "volume ./:/zap/wrk: docker rejects a relative host path; start it with ${cwd}/ for the page's folder"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 130, "zap_authenticated_scan", Warning, "parameter auth_script is used only in `volumes`, which are not interpolated: its value is ignored"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 134, "zap_authenticated_scan", Warning, "parameter context_file is used only in `volumes`, which are not interpolated: its value is ignored"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 143, "zap_authenticated_scan", Warning, "volume ./:/zap/wrk: docker rejects a relative host path; start it with ${cwd}/ for the page's folder"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 144, "zap_authenticated_scan", Warning, "volume ${HOME}/${auth_script}:/zap/wrk/auth.js: volumes are not interpolated, docker receives the text as is; only ${cwd} is replaced"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 145, "zap_authenticated_scan", Warning, "volume ${HOME}/${context_file}:/zap/wrk/context.xml: volumes are not interpolated, docker receives the text as is; only ${cwd} is replaced"},
		{"cybersecurity/offensive/web-exploitation/zap.yml", 169, "zap_scan_host_os_app", Warning, "volume ./:/zap/wrk: docker rejects a relative host path; start it with ${cwd}/ for the page's folder"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	if len(broken) != 1 || !broken["cybersecurity/offensive/information-gathering/eyewitness.yml"] {
		t.Errorf("broken pages %v, want eyewitness.yml only", broken)
	}
	// Facts of the reference's section 8.
	web, _ := lib.Function("http_get")
	if web.Page.Name != "web" || !cmp.Equal(web.Page.Categories, []string{"utilities"}) {
		t.Errorf("http_get page %q categories %v", web.Page.Name, web.Page.Categories)
	}
	zap, _ := lib.Function("zap_full_scan")
	if zap.Page.Name != "OWASP ZAP" {
		t.Errorf("zap page name %q", zap.Page.Name)
	}
	nmap, _ := lib.Function("nmap_tcp_ports_syn_scan")
	dir := filepath.Dir(nmap.Page.Path)
	if nmap.Container.Build.Path != dir+"/nmap.Dockerfile" || nmap.Container.Volumes[0] != dir+":/data" {
		t.Errorf("${cwd} not replaced: %+v", nmap.Container)
	}
	ffufai, _ := lib.Function("ffufai_full_scan")
	if p := ffufai.Parameter("wordlist"); p.Required || p.Default == nil || *p.Default != "big.txt" {
		t.Errorf("wordlist with default: %+v", p)
	}
}
