module github.com/cacheblend/cacheblend/samples/assistant

go 1.19

require github.com/cacheblend/cacheblend/bindings/go v0.0.0

replace github.com/cacheblend/cacheblend/bindings/go => ../../bindings/go
