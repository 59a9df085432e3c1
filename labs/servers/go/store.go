package main

// rpcmeter.lab.v1.Storage as the Rust lab's linearizable store (src/lab/storage.rs): one lock
// and one version order for all keys, a put answered with its version; at most storeLimit
// bytes held (keys, values and 64 bytes a key), beyond which a put is RESOURCE_EXHAUSTED.

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"rpcmeterlabs/gen/labpb"
)

const storeLimit = 64 << 20

type versioned struct {
	value   []byte
	version uint64
}

type store struct {
	labpb.UnimplementedStorageServer
	mu      sync.Mutex
	values  map[string]versioned
	version uint64
	bytes   int
}

func newStore() *store {
	return &store{values: map[string]versioned{}}
}

func (s *store) GetValue(_ context.Context, request *labpb.GetRequest) (*labpb.GetReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, found := s.values[request.Key]
	return &labpb.GetReply{Value: v.value, Version: v.version, Found: found}, nil
}

func (s *store) PutValue(_ context.Context, request *labpb.PutRequest) (*labpb.PutReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.values[request.Key]
	after := s.bytes + len(request.Value) - len(old.value)
	if !had {
		after += len(request.Key) + 64
	}
	if after > storeLimit {
		return nil, status.Errorf(codes.ResourceExhausted, "the store holds at most %d bytes", storeLimit)
	}
	s.version++
	s.values[request.Key] = versioned{value: request.Value, version: s.version}
	s.bytes = after
	return &labpb.PutReply{Version: s.version}, nil
}
