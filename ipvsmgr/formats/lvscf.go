package formats

import (
	"errors"
	"io"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

func parseLVSCF(data []byte) (*ipvsmgr.State, lineIndex, error) {
	return nil, nil, errors.New("import lvs.cf: not implemented yet")
}

func exportLVSCF(st *ipvsmgr.State, w io.Writer) error {
	return errors.New("not implemented yet")
}
