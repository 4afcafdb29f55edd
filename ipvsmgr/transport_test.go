package ipvsmgr_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// bigTable is 1,000 services of ten real servers: 11,000 ops from empty.
func bigTable() string {
	var b strings.Builder
	b.WriteString(`{"services":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"198.18.%d.%d","port":80,"servers":[`, 100+i/250, 1+i%250)
		for j := range 10 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"address":"198.18.0.%d"}`, 11+j)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// The netlink socket loses answers (ENOBUFS: the receive buffer overflowed)
// or is interrupted (EINTR) in the middle of a large batch, and again in
// the batch after: the ops of the chunk in flight were made but report the
// error, those after it were never sent. The reconcile reads the kernel again and sends only what is missing:
// every op reaches the kernel exactly once, and nothing is reported failed.
// The same for ReconcileOn (a write's reconcile on the known table).
func TestTransportErrorMidBatchIsRetriedNothingTwice(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOBUFS, syscall.EINTR} {
		for _, on := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, on the known table %v", errno, on), func(t *testing.T) {
				g := newRig(t)
				ctx := context.Background()
				d := mustCompile(t, bigTable())
				faults := 0
				g.k.BatchFault = func(n int) (int, int, error) {
					if faults == 2 || n < 1000 {
						return 0, 0, nil
					}
					faults++
					// Chunks of 256: the one at 4,096 was sent and made up to
					// 4,200 when the socket failed; nothing after it was sent.
					return 4200, 4096, errno
				}
				var res *ipvsmgr.Result
				var err error
				if on {
					res, err = g.r.ReconcileOn(ctx, d, &ipvsmgr.Table{}, nil)
				} else {
					res, err = g.r.Reconcile(ctx, d)
				}
				if err != nil {
					t.Fatal(err)
				}
				if faults != 2 {
					t.Fatalf("%d faults injected, want 2", faults)
				}
				if len(res.Failures) != 0 {
					t.Fatalf("%d failures reported, the first %+v", len(res.Failures), res.Failures[0])
				}
				ops := g.k.Ops()
				seen := map[string]int{}
				for _, op := range ops {
					seen[op]++
					if seen[op] == 2 {
						t.Errorf("applied twice: %s", op)
					}
				}
				if len(ops) != 11000 || len(seen) != 11000 {
					t.Errorf("%d ops applied (%d distinct), want 11,000 once each", len(ops), len(seen))
				}
				// The 104 of each failed chunk that were made lost their
				// answers: they are not reported as changes, only found made.
				if want := 11000 - 2*104; len(res.Changes) != want {
					t.Errorf("%d changes reported, want %d", len(res.Changes), want)
				}
				if again, err := g.r.Reconcile(ctx, d); err != nil || len(again.Changes) != 0 {
					t.Errorf("a second reconcile: %v, %d changes", err, len(again.Changes))
				}
			})
		}
	}
	if !t.Failed() { // the fault matrix's row (scripts/faults.sh)
		t.Log("FAULTROW | netlink ENOBUFS / EINTR twice in an 11,000-op batch (fake kernel, tier 1: `TestTransportErrorMidBatchIsRetriedNothingTwice`) | every op made once, none reported failed | nothing | two fresh reads |")
	}
}

// A socket that keeps failing: the reconcile gives up after a few reads and
// reports the ops it could not make, naming the transport error.
func TestTransportErrorThatPersistsIsReported(t *testing.T) {
	g := newRig(t)
	calls := 0
	g.k.BatchFault = func(n int) (int, int, error) { calls++; return 0, 0, syscall.ENOBUFS }
	res, err := g.r.Reconcile(context.Background(), mustCompile(t, twoServers))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Errorf("%d batches sent, want 4 (the first and three retries)", calls)
	}
	if len(res.Failures) != 3 || !strings.Contains(res.Failures[0].Err, "no buffer space available") {
		t.Fatalf("failures %+v", res.Failures)
	}
}
