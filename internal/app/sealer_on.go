//go:build !nosealer

package app

// sealerBuilt says this binary runs the audit sealer. scripts/bench-seal
// builds the same code with -tags nosealer as well, to measure what
// sealing costs the submissions beside it; nothing else should.
const sealerBuilt = true
