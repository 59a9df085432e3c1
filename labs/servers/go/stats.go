package main

// Server-side counters: rpcmeter.lab.v1.Stats as docs/design.md, "The lab messages" defines
// it, with the semantics of the Rust lab's src/lab/stats.rs (atomics only; Stats' own calls
// are not counted; Reset answers with the counts it zeroed).

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"rpcmeterlabs/gen/labpb"
)

type methodCounters struct {
	path                           string
	received, ok, failed, rejected atomic.Uint64
	// A unary call: one message in at arrival, one out when answered OK (as src/lab/mod.rs).
	messagesIn, messagesOut atomic.Uint64
}

type stats struct {
	labpb.UnimplementedStatsServer
	methods []*methodCounters
	byPath  map[string]*methodCounters // written once before serving, then only read
	// Unix nanoseconds; 0 = no call yet.
	firstArrival, lastArrival atomic.Uint64
	inFlight                  atomic.Int64
	started                   time.Time
}

func newStats(paths ...string) *stats {
	s := &stats{byPath: map[string]*methodCounters{}, started: time.Now()}
	for _, p := range paths {
		m := &methodCounters{path: p}
		s.methods = append(s.methods, m)
		s.byPath[p] = m
	}
	return s
}

// count is a unary interceptor: every counted call passes here.
func (s *stats) count(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m, counted := s.byPath[info.FullMethod]
	if !counted {
		return handler(ctx, req)
	}
	m.messagesIn.Add(1)
	ended := s.arrive(m)
	reply, err := handler(ctx, req)
	if status.Code(err) == codes.OK {
		m.messagesOut.Add(1)
	}
	ended(err)
	return reply, err
}

// countStream is a stream interceptor: every counted stream passes here as one call (its
// handler counts its messages).
func (s *stats) countStream(srv any, stream grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	m, counted := s.byPath[info.FullMethod]
	if !counted {
		return handler(srv, stream)
	}
	ended := s.arrive(m)
	err := handler(srv, stream)
	ended(err)
	return err
}

// arrive counts a call of m arriving; the function it returns counts how the call ended.
func (s *stats) arrive(m *methodCounters) func(error) {
	now := uint64(time.Now().UnixNano())
	m.received.Add(1)
	// The earliest arrival, whichever call gets here first.
	for first := s.firstArrival.Load(); first == 0 || now < first; first = s.firstArrival.Load() {
		if s.firstArrival.CompareAndSwap(first, now) {
			break
		}
	}
	for last := s.lastArrival.Load(); now > last; last = s.lastArrival.Load() {
		if s.lastArrival.CompareAndSwap(last, now) {
			break
		}
	}
	s.inFlight.Add(1)
	return func(err error) {
		s.inFlight.Add(-1)
		switch status.Code(err) {
		case codes.OK:
			m.ok.Add(1)
		case codes.ResourceExhausted:
			m.rejected.Add(1)
		default:
			m.failed.Add(1)
		}
	}
}

func (s *stats) Get(context.Context, *labpb.StatsRequest) (*labpb.StatsReply, error) {
	return s.read(func(n *atomic.Uint64) uint64 { return n.Load() }), nil
}

func (s *stats) Reset(context.Context, *labpb.StatsRequest) (*labpb.StatsReply, error) {
	// Each counter is swapped with 0: a call counted meanwhile is in this reply or the next.
	return s.read(func(n *atomic.Uint64) uint64 { return n.Swap(0) }), nil
}

// read reads outcomes before arrivals, so ok + failed + rejected <= received in every reply.
func (s *stats) read(read func(*atomic.Uint64) uint64) *labpb.StatsReply {
	reply := &labpb.StatsReply{}
	for _, m := range s.methods {
		ok, failed, rejected := read(&m.ok), read(&m.failed), read(&m.rejected)
		ms := &labpb.MethodStats{Method: m.path, Received: read(&m.received), Ok: ok, Failed: failed, Rejected: rejected,
			MessagesIn: read(&m.messagesIn), MessagesOut: read(&m.messagesOut)}
		reply.Methods = append(reply.Methods, ms)
		reply.Received += ms.Received
	}
	first := float64(read(&s.firstArrival)) / 1e9
	last := float64(read(&s.lastArrival)) / 1e9
	reply.FirstArrivalUnixS, reply.LastArrivalUnixS = first, last
	// n arrivals span n - 1 intervals (docs/experiments.md, "Throughput measured by the client").
	if reply.Received >= 2 && last > first {
		reply.ServerRps = float64(reply.Received-1) / (last - first)
	}
	reply.CpuSeconds = cpuSeconds()
	reply.RssBytes = rssBytes()
	if inFlight := s.inFlight.Load(); inFlight > 0 {
		reply.InFlight = uint64(inFlight)
	}
	reply.UptimeS = time.Since(s.started).Seconds()
	return reply
}

// cpuSeconds is the process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// rssBytes is the resident set size now, from /proc/self/statm (0 where it is absent).
func rssBytes() uint64 {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(statm))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
