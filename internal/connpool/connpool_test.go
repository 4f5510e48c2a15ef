package connpool

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestPool(t *testing.T) {
	p := New(grpc.WithTransportCredentials(insecure.NewCredentials()))
	a, err := p.Conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Conn("127.0.0.1:1")
	if err != nil || a != b {
		t.Fatalf("second Conn: %v, same %v", err, a == b)
	}
	p.Close()
	if _, err := p.Conn("127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
