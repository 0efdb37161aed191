// Goroutines whose waits are known by construction and timed by the program
// itself: a holder takes a sync.Mutex and keeps it SECONDS while a contender
// waits to lock it; a channel waiter waits as long for a value main sends.
// goroutines SECONDS: prints "contender_waited_s X" and "chan_waited_s X".
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

var mu sync.Mutex

//go:noinline
func holder(d time.Duration, locked chan<- struct{}) {
	mu.Lock()
	close(locked)
	time.Sleep(d)
	mu.Unlock()
}

//go:noinline
func contender(waited chan<- time.Duration) {
	start := time.Now()
	mu.Lock()
	w := time.Since(start)
	mu.Unlock()
	waited <- w
}

//go:noinline
func chanwaiter(c <-chan int, waited chan<- time.Duration) {
	start := time.Now()
	<-c
	waited <- time.Since(start)
}

func main() {
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: goroutines SECONDS")
		os.Exit(2)
	}
	d := time.Duration(seconds * float64(time.Second))
	locked := make(chan struct{})
	go holder(d, locked)
	<-locked
	contended := make(chan time.Duration, 1)
	go contender(contended)
	c := make(chan int)
	signalled := make(chan time.Duration, 1)
	go chanwaiter(c, signalled)
	time.Sleep(d)
	c <- 1
	fmt.Printf("contender_waited_s %.6f\n", (<-contended).Seconds())
	fmt.Printf("chan_waited_s %.6f\n", (<-signalled).Seconds())
}
