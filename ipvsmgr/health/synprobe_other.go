//go:build !linux

package health

import (
	"context"
	"errors"
	"time"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// synProber is Linux's; elsewhere tcp checks connect.
type synProber struct{}

func newSynProber() (*synProber, error) {
	return nil, errors.New("half-open tcp checks need Linux")
}

func (p *synProber) start(*ipvsmgr.CheckSpec, time.Time, func(Result)) bool { return false }
func (p *synProber) run(context.Context)                                    {}
func (p *synProber) hold()                                                  {}
func (p *synProber) release()                                               {}
