module hubu.dev/hubu/httpjson

go 1.26.8
