module github.com/pdhybrid/pdhybrid

go 1.26
