//go:build !linux

package gateway

// Without epoll the direct relay is not available: every stream takes the
// ordinary relay (relay.go).

import "errors"

func loopsAvailable() bool { return false }

type relayLoop struct{}

func relayWrites() int64 { return 0 }

func (*clientConn) attach() (*relayLoop, int, error) { return nil, -1, errNotDirect }

func (*clientConn) release() {}

func addStream(*relayLoop, *clientConn, *directStream) {
	panic("direct relay: no event loop on this platform")
}

func dupCloexec(int) (int, error) { return -1, errors.New("direct relay: linux only") }

func closeFd(int) {}

func shutdownFd(int) {}
