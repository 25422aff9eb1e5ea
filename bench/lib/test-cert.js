"use strict";
// A self-signed certificate and its private key for the benchmark's TCP + TLS
// row only (CN procwire-bench, subjectAltName IP:127.0.0.1 and localhost,
// P-256, valid for 100 years). It is shipped rather than made at run time so
// the row needs no openssl binary (Node's crypto cannot issue certificates).
// The key is public: it secures nothing but a loopback benchmark, and must
// never be used for anything else.

const key = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgB7vVFc1DWg2fkHAo
8mh+4fyBx+xEZu8AMEOATp86Nk6hRANCAASIx5bD1/kDQDs8/3xsQmGmhuk0lVxc
gXLrUcS3222dJoFc9x+CtyR+cUoPWRAM2RtJSBXVjZuyiNxX+TdWVVBd
-----END PRIVATE KEY-----
`;

const cert = `-----BEGIN CERTIFICATE-----
MIIBpDCCAUugAwIBAgIUEmSqMY6lE9slIXe/onyXBeEobOMwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOcHJvY3dpcmUtYmVuY2gwIBcNMjYxMTIzMTQzNTQ5WhgPMjEy
NjEwMzAxNDM1NDlaMBkxFzAVBgNVBAMMDnByb2N3aXJlLWJlbmNoMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEiMeWw9f5A0A7PP98bEJhpobpNJVcXIFy61HEt9tt
nSaBXPcfgrckfnFKD1kQDNkbSUgV1Y2bsojcV/k3VlVQXaNvMG0wHQYDVR0OBBYE
FKn7r3R9QJXUR5tU/I3/gW1fwnWIMB8GA1UdIwQYMBaAFKn7r3R9QJXUR5tU/I3/
gW1fwnWIMA8GA1UdEwEB/wQFMAMBAf8wGgYDVR0RBBMwEYcEfwAAAYIJbG9jYWxo
b3N0MAoGCCqGSM49BAMCA0cAMEQCIFLtpAGJHRldqsiIfHhXPrqYDlif5gXHN8wB
1NFpQsUuAiBcU1to9T8ZzkdLV+1R8YH4ouhHvc0Mh9nlfbaPRNMwiw==
-----END CERTIFICATE-----
`;

module.exports = { key, cert };
