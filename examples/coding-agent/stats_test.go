package stats

import "testing"

func TestMean(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{2}, 2},
		{[]float64{1, 2, 3, 4}, 2.5},
		{[]float64{-1, 1}, 0},
	} {
		got, err := Mean(tc.xs)
		if err != nil || got != tc.want {
			t.Errorf("Mean(%v) = %v, %v; want %v", tc.xs, got, err, tc.want)
		}
	}
	if _, err := Mean(nil); err != ErrEmpty {
		t.Errorf("Mean(nil) error = %v, want ErrEmpty", err)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		got, err := Median(tc.xs)
		if err != nil || got != tc.want {
			t.Errorf("Median(%v) = %v, %v; want %v", tc.xs, got, err, tc.want)
		}
	}
}
