package health

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"github.com/ipvsctl/ipvsctl/ipvsmgr"
)

// checkRADIUS is ldirectord's check_radius (Authen::Radius check_pwd): an
// Access-Request for login with its password (PAP), passing on an
// Access-Accept. The request carries a Message-Authenticator (RFC 3579),
// which servers fixed for BlastRADIUS require; a wrong secret gets no
// answer at all (the server drops what it cannot authenticate), so it
// fails by the timeout.
func checkRADIUS(ctx context.Context, spec *ipvsmgr.CheckSpec) Result {
	secret, err := readSecret(spec.SecretFile)
	if err != nil {
		return secretFileFault(err)
	}
	if secret == "" {
		return fault("secret_file: " + spec.SecretFile + " is empty")
	}
	password, err := readSecret(spec.PasswordFile)
	if err != nil {
		return secretFault(err)
	}
	req, err := radiusRequest(spec.Login, password, secret)
	if err != nil {
		return fault("RADIUS request: " + shorten(err.Error()))
	}
	// Resent every half of the timeout: one lost datagram is not a failure.
	client := radius.Client{Retry: max(spec.Timeout/2, 100*time.Millisecond), MaxPacketErrors: 10}
	resp, err := client.Exchange(ctx, req, spec.Target.String())
	if err != nil {
		return describe(ctx, spec, err)
	}
	switch resp.Code {
	case radius.CodeAccessAccept:
		return pass("Access-Accept")
	case radius.CodeAccessReject:
		if msg := rfc2865.ReplyMessage_GetString(resp); msg != "" {
			return fail("Access-Reject: " + shorten(msg))
		}
		return fail("Access-Reject")
	}
	return fail(resp.Code.String() + ", want Access-Accept")
}

// radiusRequest is a PAP Access-Request signed with a
// Message-Authenticator: HMAC-MD5 with the secret over the packet with
// that attribute zeroed.
func radiusRequest(login, password, secret string) (*radius.Packet, error) {
	p := radius.New(radius.CodeAccessRequest, []byte(secret))
	if err := rfc2865.UserName_SetString(p, login); err != nil {
		return nil, err
	}
	if err := rfc2865.UserPassword_SetString(p, password); err != nil {
		return nil, err
	}
	if err := rfc2865.NASIdentifier_SetString(p, "ipvsctl"); err != nil {
		return nil, err
	}
	if err := rfc2869.MessageAuthenticator_Set(p, make([]byte, md5.Size)); err != nil {
		return nil, err
	}
	wire, err := p.Encode()
	if err != nil {
		return nil, err
	}
	mac := hmac.New(md5.New, []byte(secret))
	mac.Write(wire)
	if err := rfc2869.MessageAuthenticator_Set(p, mac.Sum(nil)); err != nil {
		return nil, err
	}
	return p, nil
}
