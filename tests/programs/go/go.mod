module paritygo

go 1.19
