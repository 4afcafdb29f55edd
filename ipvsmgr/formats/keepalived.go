package formats

import (
	"errors"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func parseKeepalived(data []byte) (*ipvsmgr.State, lineIndex, error) {
	return nil, nil, errors.New("import keepalived: not implemented yet")
}
