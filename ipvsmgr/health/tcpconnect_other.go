//go:build !linux

package health

import (
	"context"
	"errors"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// tcpConnector is Linux's; elsewhere tcp checks dial.
type tcpConnector struct{}

func newTCPConnector() (*tcpConnector, error) {
	return nil, errors.New("non-blocking tcp checks need Linux")
}

func (c *tcpConnector) start(*ipvsmgr.CheckSpec, time.Time, func(Result)) bool { return false }
func (c *tcpConnector) run(context.Context)                                    {}
