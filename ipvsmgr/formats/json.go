package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// parseJSON reads the desired-state document of DESIGN.md.
func parseJSON(data []byte, im *importer) (*ipvsmgr.State, lineIndex, error) {
	st, err := ipvsmgr.DecodeState(bytes.NewReader(data))
	if err != nil {
		var ve *ipvsmgr.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) == 0 {
			return nil, nil, fmt.Errorf("import json: %w", err)
		}
		msg := ve.Problems[0].Message
		line := 1
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			if n, after, ok := strings.Cut(rest, ": "); ok {
				if l, err := strconv.Atoi(n); err == nil {
					line, msg = l, after
				}
			}
		} else if strings.Contains(msg, "trailing data") {
			line = lineAt(data, endOfFirstValue(data))
		} else if _, field, ok := strings.Cut(msg, "unknown field "); ok {
			line = keyLine(data, field)
		}
		return nil, nil, &ParseError{Format: FormatJSON, Line: line, Msg: msg}
	}
	li := lineIndex{}
	dec := json.NewDecoder(bytes.NewReader(data))
	// The document decoded above, so the walk cannot fail; its index only
	// lets validation problems name lines.
	_ = walkJSON(dec, data, "", li)
	return st, li, nil
}

// walkJSON records the line where the value at path and every value inside
// it begins ("services[1].servers[0].port").
func walkJSON(dec *json.Decoder, data []byte, path string, li lineIndex) error {
	li[path] = lineAt(data, dec.InputOffset())
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			if err := walkJSON(dec, data, sub, li); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkJSON(dec, data, path+"["+strconv.Itoa(i)+"]", li); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	return err
}

// lineAt is the line of the first token at or after off.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// keyLine finds the line of the first object key spelled quoted (with its
// quotes, as the decoder's message names it).
func keyLine(data []byte, quoted string) int {
	for off := 0; ; {
		i := bytes.Index(data[off:], []byte(quoted))
		if i < 0 {
			return 1
		}
		off += i + len(quoted)
		rest := bytes.TrimLeft(data[off:], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			return bytes.Count(data[:off], []byte("\n")) + 1
		}
	}
}

func endOfFirstValue(data []byte) int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return 0
	}
	return dec.InputOffset()
}
