//go:build nosealer

package app

// sealerBuilt is false in the benchmark's binary without the sealer
// (sealer_on.go).
const sealerBuilt = false
