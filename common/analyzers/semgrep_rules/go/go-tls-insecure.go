package client

import (
	"crypto/tls"
	"net/http"
)

func New(pool *x509.CertPool) *http.Client {
	// ruleid: go-tls-insecure
	bad := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	// ok: go-tls-insecure
	good := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	// ruleid: go-tls-insecure
	good.InsecureSkipVerify = true
	// ok: go-tls-insecure
	good.InsecureSkipVerify = false
	_ = bad
	return &http.Client{Transport: &http.Transport{TLSClientConfig: good}}
}
