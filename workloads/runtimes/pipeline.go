// A goroutine-heavy pipeline: ITEMS values pass through two stages over
// unbuffered channels, each stage doing a few microseconds of work, so that
// every item parks and wakes goroutines several times (well over a hundred
// thousand parks a second). Prints "elapsed_s X" and "parks_per_s X" (an
// estimate: two parks per hand-off).
// pipeline ITEMS
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func work(v int) int {
	x := v
	for j := 0; j < 2000; j++ {
		x = x*31 + j
	}
	return x
}

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: pipeline ITEMS")
		os.Exit(2)
	}
	start := time.Now()
	in, out := make(chan int), make(chan int)
	go func() {
		for v := range in {
			out <- work(v)
		}
		close(out)
	}()
	go func() {
		for i := 0; i < n; i++ {
			in <- i
		}
		close(in)
	}()
	s := 0
	for v := range out {
		s += work(v)
	}
	el := time.Since(start).Seconds()
	fmt.Printf("elapsed_s %.3f\nparks_per_s %.0f\nsum %d\n", el, float64(4*n)/el, s)
}
