//go:build kvcstrict

package kvc

// Under the kvcstrict build tag every lifecycle violation panics.
const strictDefault = true
