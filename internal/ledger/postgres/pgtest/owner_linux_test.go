package pgtest

import (
	"os"
	"syscall"
)

func ownerOf(st os.FileInfo) uint32 { return st.Sys().(*syscall.Stat_t).Uid }
