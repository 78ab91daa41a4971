package testenv

import (
	"os"
	"testing"
)

var env *Env

func TestMain(m *testing.M) {
	MainWithOptions(m, &env, Options{Workloads: os.Getenv(childWorkloadsEnv) != ""}, nil)
}
