module goprog

go 1.19
