package bytesize

import "testing"

func TestString(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1000: "1000 bytes", 1024: "1 KiB", 1536: "1536 bytes", 512 << 10: "512 KiB", 64 << 20: "64 MiB", 64<<20 + 1024: "65537 KiB"} {
		if got := String(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}
