module github.com/cacheblend/cacheblend/bindings/go

go 1.19
