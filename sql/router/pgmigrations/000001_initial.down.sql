DROP TABLE calls;
DROP TABLE installation;
