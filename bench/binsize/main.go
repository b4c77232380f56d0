// Command binsize tells what each module (or package) costs in an nb
// binary: it reads the ELF symbol table of a binary built without -s -w,
// sums the sizes of the symbols that take room in the file (code, read-only
// data, data; not .bss), and attributes each symbol to its package and the
// package to its module with `go list -deps`. Run by bench/binsize.sh.
//
//	binsize -bin nb.sym -pkg ./cmd/nb            # by module
//	binsize -bin nb.sym -pkg ./cmd/nb -by package -top 60
//	binsize -bin nb.sym -pid 1234     # what of the binary is in RSS
//
// With -pid, the process must run the same file (-bin, built without
// -s -w: stripping changes no loaded address) and binsize counts, for each
// group, the bytes of its symbols that lie in resident pages of the
// binary's mappings (/proc/PID/pagemap; needs root): which packages' code
// and data the process has touched, or the kernel has mapped around a
// touched page (fault-around maps 64 KiB of a file at a time).
//
// The function tables (.gopclntab, about three quarters of the code's own
// size) have no symbols per function: they are shared out in proportion to
// each group's code, which gives an estimate of what the group adds to the
// stripped binary. Symbols of size 0 (most strings) are not counted.
package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	bin := flag.String("bin", "", "an ELF binary built without -s -w")
	pkg := flag.String("pkg", "./cmd/nb", "the main package the binary was built from (for go list)")
	by := flag.String("by", "module", "group by `module` or package")
	top := flag.Int("top", 40, "rows to print")
	pid := flag.Int("pid", 0, "count only the bytes resident in this process (running -bin)")
	flag.Parse()
	if *bin == "" {
		log.Fatal("binsize: -bin is required")
	}
	modules, err := moduleOf(*pkg)
	if err != nil {
		log.Fatal(err)
	}
	f, err := elf.Open(*bin)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		log.Fatalf("binsize: %s: %v (build without -s -w)", *bin, err)
	}
	st, err := os.Stat(*bin)
	if err != nil {
		log.Fatal(err)
	}
	var tables uint64 // .gopclntab: per-function tables, no symbols
	for _, sec := range f.Sections {
		if sec.Name == ".gopclntab" {
			tables = sec.Size
		}
	}
	var resident func(addr, size uint64) uint64
	if *pid != 0 {
		if resident, err = residentPages(*pid, *bin); err != nil {
			log.Fatal(err)
		}
		tables = resident(sectionRange(f, ".gopclntab"))
	}
	code := map[string]uint64{}
	data := map[string]uint64{}
	var totalCode, totalData uint64
	for _, s := range syms {
		if s.Size == 0 || int(s.Section) <= 0 || int(s.Section) >= len(f.Sections) {
			continue
		}
		sec := f.Sections[s.Section]
		if sec.Type == elf.SHT_NOBITS || sec.Name == ".gopclntab" {
			continue // .bss, .noptrbss: no room in the file; the tables are shared out below
		}
		size := s.Size
		if resident != nil {
			if size = resident(s.Value, s.Size); size == 0 {
				continue
			}
		}
		p := packageOf(s.Name)
		key := p
		if *by == "module" {
			key = groupOf(p, modules)
		}
		if sec.Name == ".text" {
			code[key] += size
			totalCode += size
		} else {
			data[key] += size
			totalData += size
		}
	}
	type row struct {
		name             string
		code, data, cost uint64
	}
	var rows []row
	for k := range code {
		rows = append(rows, row{name: k})
	}
	for k := range data {
		if _, ok := code[k]; !ok {
			rows = append(rows, row{name: k})
		}
	}
	var all uint64
	for i := range rows {
		r := &rows[i]
		r.code, r.data = code[r.name], data[r.name]
		r.cost = r.data + r.code + uint64(float64(r.code)*float64(tables)/float64(totalCode))
		all += r.cost
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].cost > rows[j].cost })
	if resident != nil {
		fmt.Printf("resident in process %d: ", *pid)
	}
	fmt.Printf("%s: %d bytes; code %d, data %d, function tables %d; shared out: %d\n\n",
		*bin, st.Size(), totalCode, totalData, tables, all)
	fmt.Printf("| %s | code KB | data KB | with its tables, KB | share |\n|---|---:|---:|---:|---:|\n", *by)
	var rest row
	for i, r := range rows {
		if i >= *top {
			rest.code += r.code
			rest.data += r.data
			rest.cost += r.cost
			continue
		}
		fmt.Printf("| %s | %d | %d | %d | %.1f%% |\n", r.name, r.code/1000, r.data/1000, r.cost/1000, 100*float64(r.cost)/float64(all))
	}
	if len(rows) > *top {
		fmt.Printf("| (%d more) | %d | %d | %d | %.1f%% |\n", len(rows)-*top, rest.code/1000, rest.data/1000, rest.cost/1000, 100*float64(rest.cost)/float64(all))
	}
}

// moduleOf maps each package the main package links to its module path
// ("std" for the standard library).
func moduleOf(pkg string) (map[string]string, error) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{else}}std{{end}}", pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("binsize: go list: %v", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if p, mod, ok := strings.Cut(sc.Text(), " "); ok {
			m[p] = mod
		}
	}
	return m, sc.Err()
}

// groupOf names the module of package p; the standard library is split into
// the runtime and the rest, nb's own packages are shown by package.
func groupOf(p string, modules map[string]string) string {
	if p == "main" {
		return "github.com/nbots/nb (all its packages)"
	}
	mod, ok := modules[p]
	switch {
	case !ok && strings.HasPrefix(p, "vendor/"):
		return "std (vendored x/net, x/crypto)"
	case !ok:
		return "(runtime, types and tables: " + p + ")"
	case mod == "std" && (p == "runtime" || strings.HasPrefix(p, "internal/") || strings.HasPrefix(p, "runtime/")):
		return "std runtime"
	case mod == "std" && strings.HasPrefix(p, "crypto"):
		return "std crypto"
	case mod == "std" && strings.HasPrefix(p, "net"):
		return "std net, net/http"
	case mod == "std":
		return "std other"
	case mod == "github.com/nbots/nb":
		return "github.com/nbots/nb (all its packages)"
	}
	return mod
}

// packageOf returns the import path of the package a symbol belongs to:
// "github.com/a/b.(*T).M" → "github.com/a/b", "type:*net/http.Request" →
// "net/http", "go:itab.*os.File,io.Reader" → "os".
func packageOf(name string) string {
	for _, p := range []string{"type:", "go:itab.", "go:info.", "go:string.", "go:"} {
		if strings.HasPrefix(name, p) {
			name = name[len(p):]
			break
		}
	}
	name = strings.TrimPrefix(name, ".eq.") // a type's generated equality and hash
	name = strings.TrimPrefix(name, ".hash.")
	name = strings.TrimLeft(name, "*[]0123456789")
	if strings.HasPrefix(name, "map[") || strings.HasPrefix(name, "func(") || strings.HasPrefix(name, "struct") ||
		strings.HasPrefix(name, "interface") || strings.HasPrefix(name, "chan") {
		return "types"
	}
	end := strings.IndexAny(name, "([,")
	if end < 0 {
		end = len(name)
	}
	slash := strings.LastIndex(name[:end], "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return "types"
	}
	return strings.ReplaceAll(name[:slash+1+dot], "%2e", ".")
}

func sectionRange(f *elf.File, name string) (addr, size uint64) {
	if s := f.Section(name); s != nil {
		return s.Addr, s.Size
	}
	return 0, 0
}

// residentPages reads which pages of bin's mappings in process pid are
// present, and returns a function that counts the resident bytes of a
// range of addresses.
func residentPages(pid int, bin string) (func(addr, size uint64) uint64, error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	const page = 4096
	present := map[uint64]bool{}
	abs, _ := filepath.Abs(bin)
	for _, line := range strings.Split(string(maps), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[5] != abs {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(fields[0], "%x-%x", &lo, &hi); err != nil {
			continue
		}
		buf := make([]byte, (hi-lo)/page*8)
		if _, err := pm.ReadAt(buf, int64(lo/page*8)); err != nil {
			return nil, fmt.Errorf("binsize: pagemap: %v", err)
		}
		for i := range (hi - lo) / page {
			if binary.LittleEndian.Uint64(buf[i*8:])&(1<<63) != 0 {
				present[lo/page+i] = true
			}
		}
	}
	if len(present) == 0 {
		return nil, fmt.Errorf("binsize: process %d maps no page of %s (run that very file)", pid, abs)
	}
	return func(addr, size uint64) uint64 {
		var n uint64
		for a := addr; a < addr+size; {
			next := min((a/page+1)*page, addr+size)
			if present[a/page] {
				n += next - a
			}
			a = next
		}
		return n
	}, nil
}
