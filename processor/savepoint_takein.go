package processor

type takeIns struct{}
