package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func init() { ctrl.SetLogger(zap.New(zap.UseDevMode(true))) }
