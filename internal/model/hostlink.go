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

// StorageLinks are the storage links a profile that names none gets:
// datasheet figures, not measured here (StorageLinkSources says whence).
// They live here rather than in the built-in profiles so that a run
// without a storage tier records the same profile as before; a profile
// that has a link of the same name (a measured one) overrides them.
var StorageLinks = map[string]Link{
	"storage-mooncake": {Name: "storage-mooncake", SetupS: 100e-6, BandwidthBytes: 37.5e9},
	"storage-3fs":      {Name: "storage-3fs", SetupS: 1e-3, BandwidthBytes: 6.25e9},
}

// StorageLinkSources say where each of StorageLinks' figures come from.
var StorageLinkSources = map[string]string{
	"storage-mooncake": "datasheet, not measured: Mooncake Store (kvcache-ai/Mooncake) keeps KV in the DRAM of remote nodes and moves it with its Transfer Engine over RDMA; an H100/H200 node has one 400 Gb/s ConnectX-7 NIC per GPU, taken at the profiles' effective RDMA rate (rdma-400g: 300 Gb/s = 37.5 GB/s, 100 us setup)",
	"storage-3fs":      "datasheet, not measured: 3FS (deepseek-ai/3FS) serves KV from remote NVMe over RDMA; its README's KVCache clients have one 400 Gb/s NIC per node (50 GB/s line rate), here shared by the node's 8 GPUs = 6.25 GB/s a worker; 1 ms setup assumed (an NVMe read and a network round trip); the README's KVCache read peak, 40 GiB/s, is for all its clients together, so a loaded cluster gives each worker less",
}

// StorageLink is the link to a storage backend: the profile's, else the
// datasheet default.
func (p *Profile) StorageLink(backend string) (Link, error) {
	name, ok := StorageLinkName[backend]
	if !ok {
		return Link{}, fmt.Errorf("storage backend %q, expected one of hf3fs, mooncake", backend)
	}
	if l, ok := p.Links[name]; ok {
		if l.BandwidthBytes <= 0 {
			return Link{}, fmt.Errorf("profile %s: link %q has bandwidth %g, expected > 0", p.Name, name, l.BandwidthBytes)
		}
		return l, nil
	}
	return StorageLinks[name], nil
}
