// Goroutines that park and nothing else: a producer and consumers passing
// work over channels, and sleepers in time.Sleep. No goroutine ever waits
// for a lock; the OS threads under them wait only in the Go scheduler.
// parkers SECONDS: prints "handoffs N" and "sleeps N".
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

var sink atomic.Uint64

// work burns CPU for about d.
func work(d time.Duration) {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		x = x*31 + 7
	}
	sink.Add(x)
}

func main() {
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: parkers SECONDS")
		os.Exit(2)
	}
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	jobs := make(chan int)
	var handoffs, sleeps atomic.Uint64
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				work(200 * time.Microsecond)
				handoffs.Add(1)
			}
		}()
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				time.Sleep(3 * time.Millisecond)
				sleeps.Add(1)
			}
		}()
	}
	for time.Now().Before(end) {
		jobs <- 1
		time.Sleep(time.Millisecond)
	}
	close(jobs)
	wg.Wait()
	fmt.Println("handoffs", handoffs.Load())
	fmt.Println("sleeps", sleeps.Load())
}
