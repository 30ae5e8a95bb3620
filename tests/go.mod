module github.com/tulip-temporal/tulip/tests

go 1.26.8

require (
	github.com/tulip-temporal/tulip v0.0.0
	github.com/tulip-temporal/tulip/cmd v0.0.0
	github.com/tulip-temporal/tulip/devserver v0.0.0
)

replace (
	github.com/tulip-temporal/tulip => ../
	github.com/tulip-temporal/tulip/cmd => ../cmd
	github.com/tulip-temporal/tulip/devserver => ../devserver
)
