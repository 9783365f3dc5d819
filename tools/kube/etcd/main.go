// Command etcd is the etcd server (go.etcd.io/etcd/server/v3) the Kubernetes
// backends' tests store their API server's objects in.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
