module hubu.dev/hubu/kit

go 1.26.8
