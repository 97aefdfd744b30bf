// cpprofbench-go: the Go side of bench/report.sh.  The same
// measurements cpprof's benches make, taken of Go's own runtime/pprof, so
// the report can print them side by side:
//
//	labels              ns per pprof.Do with a prebuilt two-label set
//	jobmix SECONDS      the demo's job mix (tenants acme, globex, initech at
//	                    CPU costs 1:2:5) under a SECONDS-long CPU profile at
//	                    100 Hz: each tenant's profile share against its true
//	                    share (thread CPU clocks around every job), and the
//	                    profile's sampled CPU against getrusage over the window
//	goroutines N        ms to write the goroutine profile (debug=0) with N
//	                    more goroutines parked in labelled scopes
//	fgprof N            bench/wall's case in Go: N goroutines parked in a
//	                    channel receive and 2 that alternate 1 ms of work
//	                    with 4 ms of sleep; the process's CPU over a 3 s
//	                    window with a sampler of fgprof's design (every
//	                    goroutine's stack 99 times a second through
//	                    runtime.GoroutineProfile, counted per stack in a
//	                    map), less the same window without, as a
//	                    percentage of one CPU.  fgprof itself is not
//	                    packaged by Debian; its loop is that small.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build (the profile
// package is Debian's golang-github-google-pprof-dev).
package main

import (
	"bytes"
	"context"
	"fmt"
	"io/ioutil"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/google/pprof/profile"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cpprofbench-go labels | jobmix SECONDS | goroutines N | fgprof N")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "labels":
		benchLabels()
	case "jobmix":
		jobmix(argInt(2))
	case "goroutines":
		goroutines(argInt(2))
	case "fgprof":
		fgprofCost(argInt(2))
	default:
		usage()
	}
}

func argInt(i int) int {
	if len(os.Args) <= i {
		usage()
	}
	n, err := strconv.Atoi(os.Args[i])
	if err != nil || n <= 0 {
		usage()
	}
	return n
}

var sink uint32

// benchLabels: pprof.Do with a prebuilt set, as bench/labels measures
// cpprof_do; the median of 5 rounds.
func benchLabels() {
	set := pprof.Labels("tenant", "acme", "kind", "export")
	ctx := context.Background()
	fn := func(context.Context) { sink++ }
	const n = 2000000
	var rounds []float64
	for r := 0; r < 5; r++ {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			pprof.Do(ctx, set, fn)
		}
		rounds = append(rounds, float64(time.Since(t0).Nanoseconds())/n)
	}
	sort.Float64s(rounds)
	fmt.Printf("go_pprof_do_ns %.1f\n", rounds[len(rounds)/2])
}

// threadCPU is this thread's CPU time (the goroutine is locked to it).
func threadCPU() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID,
		uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// decodeBlock is the demo's inner loop (examples/jobrunner.c).
//
//go:noinline
func decodeBlock(seed uint32) uint32 {
	var block [4096]byte
	for i := range block {
		block[i] = byte(seed + uint32(i)*2654435761)
	}
	h := seed
	for _, b := range block {
		h = (h ^ uint32(b)) * 16777619
	}
	return h
}

var tenants = []string{"acme", "globex", "initech"}
var costs = []int{1, 2, 5}

// jobmix runs two workers (the demo's default) taking jobs round-robin by
// tenant, each job a cost of 40-iteration units inside pprof.Do, and
// compares the CPU profile's shares with the threads' own clocks.
func jobmix(seconds int) {
	var trueNs [3]int64
	var stop int32
	var wg sync.WaitGroup
	var next int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			for atomic.LoadInt32(&stop) == 0 {
				t := int(atomic.AddInt64(&next, 1) % 3)
				labels := pprof.Labels("tenant", tenants[t], "kind", "export")
				pprof.Do(context.Background(), labels, func(context.Context) {
					t0 := threadCPU()
					h := uint32(t)
					for i := 0; i < costs[t]*40; i++ {
						h = decodeBlock(h + uint32(i))
					}
					sink += h
					atomic.AddInt64(&trueNs[t], threadCPU()-t0)
				})
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	var buf bytes.Buffer
	var before [3]int64
	for t := range before {
		before[t] = atomic.LoadInt64(&trueNs[t])
	}
	cpu0 := processCPU()
	if err := pprof.StartCPUProfile(&buf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	time.Sleep(time.Duration(seconds) * time.Second)
	pprof.StopCPUProfile()
	cpu1 := processCPU()
	var truth [3]float64
	var total float64
	for t := range truth {
		truth[t] = float64(atomic.LoadInt64(&trueNs[t]) - before[t])
		total += truth[t]
	}
	atomic.StoreInt32(&stop, 1)
	wg.Wait()

	p, err := profile.Parse(&buf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var byTenant [3]float64
	var labelled, sampledNs float64
	for _, s := range p.Sample {
		sampledNs += float64(s.Value[1])
		for t, name := range tenants {
			if len(s.Label["tenant"]) == 1 && s.Label["tenant"][0] == name {
				byTenant[t] += float64(s.Value[0])
				labelled += float64(s.Value[0])
			}
		}
	}
	worst := 0.0
	for t, name := range tenants {
		share, want := byTenant[t]/labelled, truth[t]/total
		d := 100 * (share - want)
		if d < 0 {
			d = -d
		}
		if d > worst {
			worst = d
		}
		fmt.Printf("go_tenant %s profile_share %.4f true_share %.4f\n", name, share, want)
	}
	fmt.Printf("go_max_share_diff_points %.2f\n", worst)
	fmt.Printf("go_sampled_cpu_ratio %.4f\n", sampledNs/float64(cpu1-cpu0))
}

// parkLabelled parks n goroutines inside labelled scopes (tenant by
// turn), each in a channel receive until release is closed.
func parkLabelled(n int) (release chan struct{}) {
	release = make(chan struct{})
	var parked sync.WaitGroup
	for i := 0; i < n; i++ {
		parked.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("tenant", tenants[i%3]),
			func(context.Context) {
				parked.Done()
				<-release
			})
	}
	parked.Wait()
	return release
}

// goroutines parks n goroutines inside labelled scopes, then times the
// goroutine profile (the median of 5).
func goroutines(n int) {
	release := parkLabelled(n)
	var rounds []float64
	for r := 0; r < 5; r++ {
		t0 := time.Now()
		pprof.Lookup("goroutine").WriteTo(ioutil.Discard, 0)
		rounds = append(rounds, float64(time.Since(t0).Microseconds())/1000)
	}
	close(release)
	sort.Float64s(rounds)
	fmt.Printf("go_goroutines %d profile_ms %.2f\n", n, rounds[len(rounds)/2])
}

// sampleLikeFgprof takes every goroutine's stack hz times a second until
// stop closes, counting each distinct stack, as fgprof's profiler loop
// does; returns the samples taken.
func sampleLikeFgprof(hz int, stop <-chan struct{}) int {
	counts := map[string]int{}
	records := make([]runtime.StackRecord, 1024)
	ticker := time.NewTicker(time.Second / time.Duration(hz))
	defer ticker.Stop()
	samples := 0
	var key bytes.Buffer
	for {
		select {
		case <-stop:
			return samples
		case <-ticker.C:
		}
		n, ok := runtime.GoroutineProfile(records)
		for !ok {
			records = make([]runtime.StackRecord, n*5/4+16)
			n, ok = runtime.GoroutineProfile(records)
		}
		for _, r := range records[:n] {
			key.Reset()
			for _, pc := range r.Stack() {
				fmt.Fprintf(&key, "%x;", pc)
			}
			counts[key.String()]++
		}
		samples++
	}
}

func fgprofCost(n int) {
	const window = 3 * time.Second
	release := parkLabelled(n)
	var workersStop int32
	for w := 0; w < 2; w++ {
		go func() {
			for atomic.LoadInt32(&workersStop) == 0 {
				for t0 := time.Now(); time.Since(t0) < time.Millisecond; {
					sink++
				}
				time.Sleep(4 * time.Millisecond)
			}
		}()
	}
	cpu0 := processCPU()
	time.Sleep(window)
	base := processCPU() - cpu0
	stop := make(chan struct{})
	done := make(chan int)
	cpu1 := processCPU()
	go func() { done <- sampleLikeFgprof(99, stop) }()
	time.Sleep(window)
	close(stop)
	samples := <-done
	with := processCPU() - cpu1
	atomic.StoreInt32(&workersStop, 1)
	close(release)
	fmt.Printf("go_fgprof goroutines %d hz 99 cpu_pct %.2f achieved_hz %.1f\n", n,
		100*float64(with-base)/float64(window.Nanoseconds()), float64(samples)/window.Seconds())
}
