package kubeclient

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Archive modes of the Kubernetes backends' sources.
const (
	ArchiveSnapshot = "snapshot" // a VolumeSnapshot of each volume before removal
	ArchiveNone     = "none"     // volumes are removed without a snapshot
)

// DefaultSnapshotTimeout bounds the wait for a snapshot to be ready.
const DefaultSnapshotTimeout = 10 * time.Minute

// ParseScope checks where a source looks, a namespace and a label
// selector, both required: nothing outside them is ever touched.
func ParseScope(namespace, selector string) (labels.Selector, error) {
	if namespace == "" {
		return nil, errors.New("namespace is required")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if strings.TrimSpace(selector) == "" {
		return nil, errors.New("selector is required (a label selector such as \"runtime_id\" or \"app=openhands-runtime\"): nothing outside it is touched")
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w", selector, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("selector %q selects everything", selector)
	}
	return sel, nil
}

// ParseArchive checks an archive mode; "" is ArchiveSnapshot.
func ParseArchive(mode string) (string, error) {
	switch mode {
	case "":
		return ArchiveSnapshot, nil
	case ArchiveSnapshot, ArchiveNone:
		return mode, nil
	}
	return "", fmt.Errorf("archive %q: want %q or %q", mode, ArchiveSnapshot, ArchiveNone)
}

// AndSelector adds more to a selector ("" for nothing more).
func AndSelector(sel labels.Selector, more string) string {
	if more == "" {
		return sel.String()
	}
	return sel.String() + "," + more
}
