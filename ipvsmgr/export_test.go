package ipvsmgr

// DecodeFast is the fast decoder alone, for the codec's tests to compare with
// encoding/json.
var DecodeFast = decodeFast

// DecodeJSON is DecodeState with encoding/json alone.
var DecodeJSON = decodeJSON
