//go:build !kvcstrict

package kvc

const strictDefault = false
