// Package stats computes simple statistics of samples.
package stats

import (
	"errors"
	"sort"
)

// ErrEmpty is returned for a sample without values.
var ErrEmpty = errors.New("stats: empty sample")

// Mean returns the arithmetic mean of xs.
func Mean(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return 0, ErrEmpty
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs)-1), nil
}

// Median returns the middle value of xs (the mean of the two middle
// values when there is an even number of them). xs is not modified.
func Median(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return 0, ErrEmpty
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	mid := len(s) / 2
	if len(s)%2 == 0 {
		return (s[mid-1] + s[mid]) / 2, nil
	}
	return s[mid], nil
}
