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

// StorageLinkName is the profile link a storage backend (SGLang HiCache's
// L3, --hicache-storage-backend) is reached over, per backend: Mooncake's
// store (remote DRAM over RDMA) and 3FS (remote NVMe over RDMA).
var StorageLinkName = map[string]string{
	"mooncake": "storage-mooncake",
	"hf3fs":    "storage-3fs",
}

// StorageBackends are the backends StorageLinkName knows, sorted.
var StorageBackends = []string{"hf3fs", "mooncake"}

// StorageLink is the profile's link to a storage backend.
func (p *Profile) StorageLink(backend string) (Link, error) {
	name, ok := StorageLinkName[backend]
	if !ok {
		return Link{}, fmt.Errorf("storage backend %q, expected one of hf3fs, mooncake", backend)
	}
	l, ok := p.Links[name]
	if !ok || l.BandwidthBytes <= 0 {
		return Link{}, fmt.Errorf("profile %s has no %q link (the %s storage backend's bandwidth)", p.Name, name, backend)
	}
	return l, nil
}
