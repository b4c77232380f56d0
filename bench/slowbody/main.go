// Command slowbody measures what slow request bodies cost nb serve: it
// opens -conns connections from 127.0.0.1, each sending the header of a
// POST /cartridges that announces 200,000 bytes and then a byte every
// -every (half of them with the token, half without), and meanwhile asks
// the server for /healthz and GET /cartridges from ::1 every 50 ms for
// -for. It prints the well-behaved client's latencies and failures, the
// answers the slow connections got, and how long the server held them.
//
//	go run ./bench/slowbody -port 3048 -token "$NB_SERVE_TOKEN"
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	port := flag.String("port", "3048", "the port of nb serve on 127.0.0.1 and ::1")
	token := flag.String("token", "", "the server's token")
	conns := flag.Int("conns", 2000, "slow connections")
	every := flag.Duration("every", 500*time.Millisecond, "time between the bytes of a slow body")
	during := flag.Duration("for", 20*time.Second, "how long the well-behaved client measures")
	flag.Parse()

	type slow struct {
		start, end time.Time
		status     string
	}
	slows := make([]slow, *conns)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &slows[i]
			s.start = time.Now()
			c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", *port), 5*time.Second)
			if err != nil {
				s.end, s.status = time.Now(), "dial failed"
				return
			}
			defer c.Close()
			req := "POST /cartridges HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n"
			if i%2 == 0 && *token != "" {
				req += "Authorization: Bearer " + *token + "\r\n"
			}
			if _, err := io.WriteString(c, req+"\r\n{"); err != nil {
				s.end, s.status = time.Now(), "write failed"
				return
			}
			answered := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.Copy(io.Discard, c) //nolint:errcheck // until closed
				answered <- strings.TrimSpace(strings.TrimPrefix(line, "HTTP/1.1 "))
			}()
			t := time.NewTicker(*every)
			defer t.Stop()
			for {
				select {
				case st := <-answered:
					s.end, s.status = time.Now(), st
					return
				case <-stop:
					return
				case <-t.C:
					c.SetWriteDeadline(time.Now().Add(time.Second)) //nolint:errcheck // measured
					c.Write([]byte(" "))                            //nolint:errcheck // the reader sees the close
				}
			}
		}()
		if i%100 == 99 {
			time.Sleep(50 * time.Millisecond)
		}
	}

	client := &http.Client{Timeout: 2 * time.Second}
	var lat []time.Duration
	failures := map[string]int{}
	end := time.Now().Add(*during)
	for time.Now().Before(end) {
		for _, path := range []string{"/healthz", "/cartridges"} {
			req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort("::1", *port)+path, nil)
			if *token != "" {
				req.Header.Set("Authorization", "Bearer "+*token)
			}
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				failures["error"]++
				continue
			}
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // measured
			resp.Body.Close()
			lat = append(lat, time.Since(start))
			if resp.StatusCode != 200 {
				failures[resp.Status]++
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		fmt.Printf("client: %d answers, median %v, p99 %v, max %v; failures %v\n", len(lat), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), failures)
	} else {
		fmt.Printf("client: no answer; failures %v\n", failures)
	}
	statuses := map[string]int{}
	held := 0
	var longest time.Duration
	for _, s := range slows {
		if s.end.IsZero() {
			held++
			continue
		}
		statuses[s.status]++
		longest = max(longest, s.end.Sub(s.start))
	}
	fmt.Printf("slow connections: %d still held after %v; ended: %v; the longest ended after %v\n", held, *during, statuses, longest.Round(time.Millisecond))
	if len(lat) == 0 {
		os.Exit(1)
	}
}
