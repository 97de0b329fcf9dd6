module hubu.dev/hubu/failpoint

go 1.26.8
