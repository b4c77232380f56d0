// Command barepost is the floor for a cold `nb CART - eval hi`: a Go
// program that makes the same streamed chat completion request to the
// provider at $OPENAI_API_ADDRESS and prints the answer's text, with
// nothing else (no cartridge, no configuration, no state). bench/coldstart.sh
// times nb against it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
)

func main() {
	body, _ := json.Marshal(map[string]any{
		"model":    "bench",
		"stream":   true,
		"messages": []map[string]string{{"role": "system", "content": "You are fast."}, {"role": "user", "content": "hi"}},
	})
	req, err := http.NewRequest("POST", strings.TrimSuffix(os.Getenv("OPENAI_API_ADDRESS"), "/")+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &ev) == nil && len(ev.Choices) > 0 {
			out.WriteString(ev.Choices[0].Delta.Content)
		}
	}
	out.WriteString("\n")
}
