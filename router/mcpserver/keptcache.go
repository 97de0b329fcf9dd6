package mcpserver

import (
	"container/list"
	"sync"
)

// keptCacheBytes bounds the kept images a router holds in memory: a redelivery usually follows
// its call within seconds (a client retrying a lost answer), and is then answered without a
// request to Gongbu.
const keptCacheBytes = 4 << 20

// keptCache holds recently embedded kept images. An image never changes, and each is held
// under the operation it belongs to and the digest Gongbu described, so a hit is exactly what
// Gongbu would serve for that answer. It forgets the least recently used first and holds no
// image larger than a quarter of its budget.
type keptCache struct {
	mu     sync.Mutex
	max    int
	size   int
	byKey  map[keptKey]*list.Element // of *keptEntry
	recent list.List                 // most recently used first
}

type keptKey struct{ handle, sha256 string }

type keptEntry struct {
	key keptKey
	img []byte
}

func newKeptCache(maxBytes int) *keptCache {
	return &keptCache{max: maxBytes, byKey: map[keptKey]*list.Element{}}
}

func (c *keptCache) get(handle, sha256 string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[keptKey{handle, sha256}]
	if !ok {
		return nil
	}
	c.recent.MoveToFront(el)
	return el.Value.(*keptEntry).img
}

func (c *keptCache) put(handle, sha256 string, img []byte) {
	if len(img) > c.max/4 {
		return
	}
	key := keptKey{handle, sha256}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.recent.MoveToFront(el)
		return
	}
	c.byKey[key] = c.recent.PushFront(&keptEntry{key: key, img: img})
	c.size += len(img)
	for c.size > c.max {
		old := c.recent.Remove(c.recent.Back()).(*keptEntry)
		delete(c.byKey, old.key)
		c.size -= len(old.img)
	}
}
