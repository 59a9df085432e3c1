package main

// rpcmeter.lab.v1.Streaming as the Rust lab's src/lab/streaming.rs serves it: one method per
// streaming kind, each stream counted as a call (countStream) and each message as a message,
// so a test can record streaming calls in grpc-go's binary log and count their replay.

import (
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"rpcmeterlabs/gen/labpb"
)

// maxChunkBytes and maxInterval bound Subscribe as the Rust lab bounds it.
const (
	maxChunkBytes = 4 << 20
	maxInterval   = time.Hour
)

type streaming struct {
	labpb.UnimplementedStreamingServer
	stats *stats
}

// counters is the counters of the stream's method (registered in main).
func (s streaming) counters(stream grpc.ServerStream) *methodCounters {
	method, _ := grpc.MethodFromServerStream(stream)
	return s.stats.byPath[method]
}

// Subscribe sends count chunks of size bytes (0: until the client cancels), interval_us apart.
func (s streaming) Subscribe(request *labpb.SubscribeRequest, stream labpb.Streaming_SubscribeServer) error {
	m := s.counters(stream)
	m.messagesIn.Add(1)
	if request.Size > maxChunkBytes {
		return status.Errorf(codes.InvalidArgument, "size %d is more than %d bytes", request.Size, maxChunkBytes)
	}
	interval := time.Duration(request.IntervalUs) * time.Microsecond
	if interval > maxInterval {
		return status.Errorf(codes.InvalidArgument, "interval_us %d is more than an hour", request.IntervalUs)
	}
	payload := make([]byte, request.Size)
	for i := range payload {
		payload[i] = 'x'
	}
	for seq := uint64(0); request.Count == 0 || seq < uint64(request.Count); seq++ {
		if seq > 0 && interval > 0 {
			select {
			case <-time.After(interval):
			case <-stream.Context().Done():
				return status.FromContextError(stream.Context().Err()).Err()
			}
		}
		if err := stream.Send(&labpb.Chunk{Payload: payload, Seq: seq}); err != nil {
			return err
		}
		m.messagesOut.Add(1)
	}
	return nil
}

// Upload counts what arrives until the client closes its side.
func (s streaming) Upload(stream labpb.Streaming_UploadServer) error {
	m := s.counters(stream)
	summary := &labpb.UploadSummary{}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		m.messagesIn.Add(1)
		summary.Chunks++
		summary.Bytes += uint64(len(chunk.Payload))
	}
	m.messagesOut.Add(1)
	return stream.SendAndClose(summary)
}

// Echo sends each chunk back as it arrives; the stream ends when the client closes its side.
func (s streaming) Echo(stream labpb.Streaming_EchoServer) error {
	m := s.counters(stream)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		m.messagesIn.Add(1)
		if err := stream.Send(chunk); err != nil {
			return err
		}
		m.messagesOut.Add(1)
	}
}
