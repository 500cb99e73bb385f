package model

import "fmt"

// HostLinkName is the profile link a GPU's host memory is reached over:
// the PCIe Gen5 x16 link of an H100 or H200 SXM. The engine's host KV tier
// (SGLang HiCache's L2) loads back and writes through over it.
const HostLinkName = "host-pcie5"

// HostLink is the profile's GPU↔host link. A profile without one cannot
// model a host KV tier: the error names the link the profile lacks.
func (p *Profile) HostLink() (Link, error) {
	l, ok := p.Links[HostLinkName]
	if !ok || l.BandwidthBytes <= 0 {
		return Link{}, fmt.Errorf("profile %s has no %q link (GPU↔host bandwidth), which a host KV tier needs", p.Name, HostLinkName)
	}
	return l, nil
}
