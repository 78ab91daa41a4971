package testenv

import "testing"

var env *Env

func TestMain(m *testing.M) { Main(m, &env) }
