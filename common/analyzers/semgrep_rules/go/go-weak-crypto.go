package auth

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"math/rand"
)

func HashPassword(pw string) string {
	// ruleid: go-weak-crypto
	sum := md5.Sum([]byte(pw))
	return hex.EncodeToString(sum[:])
}

func Digest(data []byte) string {
	// ok: go-weak-crypto
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func NewSessionToken() int64 {
	// ruleid: go-weak-crypto
	return rand.Int63()
}

func Jitter() int {
	// ok: go-weak-crypto
	return rand.Intn(100)
}
