package bytesize

import "testing"

func TestString(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1000: "1000 bytes", 1024: "1 KiB", 1536: "1536 bytes", 512 << 10: "512 KiB", 64 << 20: "64 MiB", 64<<20 + 1024: "65537 KiB"} {
		if got := String(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"4194304": 4 << 20, "512KiB": 512 << 10, "4MiB": 4 << 20, "4 MiB": 4 << 20, "2KB": 2 << 10, "3M": 3 << 20, "10B": 10} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "4GiB", "lots", "9223372036854775807MiB"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) took it; want an error", in)
		}
	}
}
