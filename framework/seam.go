package framework

import (
	"github.com/converge-dev/converge/framework/internal/seam"
	"github.com/converge-dev/converge/framework/introspect"
)

func init() {
	seam.Provider = func(mgr any) introspect.Provider { return debugProvider{mgr.(*Manager)} }
}
